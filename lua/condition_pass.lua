-- A waiter that took a notification and cannot act on it (the lock's maximum hold time came
-- before it held the lock again, or taking it again failed) hands it on to the next live
-- waiter, so that it is not lost. It holds no lock: the notification was given by a holder.
-- KEYS[1]  the condition's waiters "redlatch_condition:{name}:<condition>" (ZSET)
-- KEYS[2]  the condition's queue "redlatch_condition_queue:{name}:<condition>" (LIST)
-- KEYS[3]  the call's receipt "redisson_unlock_latch:{name}:<client uuid>-<n>" (STRING: the
--          reply of the call that wrote it)
-- ARGV[1]  the receipt's time to live in ms
-- Reply:   1   handed on: the longest-waiting live waiter was picked (written to KEYS[3] for
--              ARGV[1] ms, so that the call sent again after its reply was lost picks no
--              other)
--          0   no live waiter was left to hand it to
--          "1" the receipt's: the call was made before (its reply was lost), nothing changed
-- The clock is read before anything is written (see condition_leave.lua).
local now = clock_ms();
local made = redis.call('get', KEYS[3]);
if made then
    return made;
end;
if cond_pick(KEYS[1], KEYS[2], now) then
    redis.call('set', KEYS[3], 1, 'px', ARGV[1]);
    return 1;
end;
return 0;
