-- A waiter that took a notification and cannot act on it (the lock's maximum hold time came
-- before it held the lock again, or taking it again failed) hands it on to the next live
-- waiter, so that it is not lost. It holds no lock: the notification was given by a holder.
-- KEYS[1]  the condition's waiters "redlatch_condition:{name}:<condition>" (ZSET)
-- KEYS[2]  the condition's queue "redlatch_condition_queue:{name}:<condition>" (LIST)
-- Reply:   1   handed on: the longest-waiting live waiter was picked
--          0   no live waiter was left to hand it to
-- The clock is read before anything is written (see condition_leave.lua).
local now = clock_ms();
if cond_pick(KEYS[1], KEYS[2], now) then
    return 1;
end;
return 0;
