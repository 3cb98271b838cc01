-- Notify a condition: pick up to ARGV[2] of its live waiters, longest-waiting first, each
-- woken on its own channel. Only a holder of the lock may notify (as Java's Condition asks).
-- KEYS[1]  lock name (HASH: field -> hold count)
-- KEYS[2]  the condition's waiters "redlatch_condition:{name}:<condition>" (ZSET)
-- KEYS[3]  the condition's queue "redlatch_condition_queue:{name}:<condition>" (LIST)
-- KEYS[4]  the call's receipt "redisson_unlock_latch:{name}:<client uuid>-<n>" (STRING: the
--          reply of the call that wrote it)
-- ARGV[1]  the notifier's hash field in KEYS[1] (the owner id, or "<owner>:write")
-- ARGV[2]  how many waiters to pick at most; 0 for all
-- ARGV[3]  the receipt's time to live in ms
-- Reply:   -1      the caller does not hold the lock (nothing changed)
--          n >= 0  waiters picked: each has its deadline negated and was sent '1' on its
--                  channel; dead waiters met on the way were dropped and are not counted
--                  (a notification a dead waiter held is passed on first, and not counted);
--                  n is written to KEYS[4] for ARGV[3] ms
--          "<n>"   the receipt's: the call was made before (its reply was lost), nothing
--                  changed
-- A call whose reply was lost is sent again with the same receipt, and picks no more.
local made = redis.call('get', KEYS[4]);
if made then
    return made;
end;
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return -1;
end;
local now = clock_ms();
cond_prune(KEYS[2], KEYS[3], now);
local want = tonumber(ARGV[2]);
local picked = 0;
while want == 0 or picked < want do
    if not cond_pick(KEYS[2], KEYS[3], now) then
        break;
    end;
    picked = picked + 1;
end;
redis.call('set', KEYS[4], picked, 'px', ARGV[3]);
return picked;
