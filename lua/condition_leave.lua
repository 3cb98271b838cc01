-- A waiter gives up (timed out, interrupted, its client closing): it leaves the condition. A
-- notification that picked it meanwhile is taken (a timed wait that ends so was notified) or,
-- with ARGV[2] "pass", handed on to the next live waiter, so that it is not lost.
-- KEYS[1]  the condition's waiters "redlatch_condition:{name}:<condition>" (ZSET)
-- KEYS[2]  the condition's queue "redlatch_condition_queue:{name}:<condition>" (LIST)
-- KEYS[3]  the call's receipt "redisson_unlock_latch:{name}:<client uuid>-<n>" (STRING: the
--          reply of the call that wrote it)
-- ARGV[1]  the waiter id
-- ARGV[2]  "pass" to hand a notification on, "take" to take it
-- ARGV[3]  the receipt's time to live in ms
-- Reply:   0   it was waiting: it left both keys
--          1   a notification had picked it: taken (with "take")
--          2   a notification had picked it: handed on to the next live waiter (with "pass")
--          3   a notification had picked it, and no live waiter was left to hand it to
--          -1  not there (its lease ran out, or it left already)
--          "<n>"  the receipt's: the call was made before (its reply was lost), nothing
--              changed
-- Every reply but -1 is written to KEYS[3] for ARGV[3] ms: a call whose reply was lost is
-- sent again with the same receipt, and learns what the first one did.
-- The clock is read before anything is written (a script may read TIME only before its
-- first write where scripts are replicated verbatim).
local now = clock_ms();
local made = redis.call('get', KEYS[3]);
if made then
    return made;
end;
local function receipt(reply)
    redis.call('set', KEYS[3], reply, 'px', ARGV[3]);
    return reply;
end;
local score = redis.call('zscore', KEYS[1], ARGV[1]);
if score == false then
    return -1;
end;
redis.call('zrem', KEYS[1], ARGV[1]);
if tonumber(score) >= 0 then
    redis.call('lrem', KEYS[2], 1, ARGV[1]);
    return receipt(0);
end;
if ARGV[2] ~= 'pass' then
    return receipt(1);
end;
if cond_pick(KEYS[1], KEYS[2], now) then
    return receipt(2);
end;
return receipt(3);
