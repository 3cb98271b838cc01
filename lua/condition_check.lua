-- A waiter looks whether a notification picked it, and takes it if so.
-- KEYS[1]  the condition's waiters "redlatch_condition:{name}:<condition>" (ZSET)
-- ARGV[1]  the waiter id
-- Reply:   1   notified: the waiter's entry is gone (taken)
--          0   still waiting
--          -1  not there: its lease ran out and it was dropped (it may have missed a
--              notification)
local score = redis.call('zscore', KEYS[1], ARGV[1]);
if score == false then
    return -1;
end;
if tonumber(score) < 0 then
    redis.call('zrem', KEYS[1], ARGV[1]);
    return 1;
end;
return 0;
