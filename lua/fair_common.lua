-- Helpers shared by the fair lock scripts: prepended to each fair_*.lua (see src/scripts.rs).
--
-- The queue (LIST) holds waiting owners in arrival order; the timeout set (ZSET) maps each of
-- them to a deadline in ms on the server's clock (TIME), so client clocks never matter. A head
-- whose deadline passed is presumed dead and popped (and the next one too, if its deadline
-- passed as well). A waiter's deadline is the lock's expiry (now if free) plus one thread wait
-- per place up to and including its own, as in Redisson: set when it joins and each time it
-- checks in (every half thread wait at most), lowered by one thread wait when a waiter ahead
-- leaves, and for the head set afresh when the lock is freed or when it moves up because the
-- waiters ahead left or were popped. A live waiter therefore never sees its deadline pass.

local function fair_now()
    local t = redis.call('time');
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000);
end;

-- The lock's remaining lease for deadline arithmetic: 0 if free, `wait` if it never expires.
local function fair_pttl(lock, wait)
    local pttl = redis.call('pttl', lock);
    if pttl == -1 then
        return wait;
    elseif pttl < 0 then
        return 0;
    end;
    return pttl;
end;

-- Pops presumed-dead heads (no deadline, or deadline reached). Returns the head left (false
-- if the queue is empty) and whether any head was popped.
local function fair_prune(queue, timeouts, now)
    local changed = false;
    while true do
        local head = redis.call('lindex', queue, 0);
        if head == false then
            return false, changed;
        end;
        local deadline = tonumber(redis.call('zscore', timeouts, head));
        if deadline ~= nil and deadline > now then
            return head, changed;
        end;
        redis.call('lpop', queue);
        redis.call('zrem', timeouts, head);
        changed = true;
    end;
end;

-- Starts the turn of `head` (false: nobody queued): its deadline becomes now + `pttl` (the
-- lock's remaining lease as fair_pttl gives it) + wait, and when the lock is `free` '0' is
-- published on the head's own channel `<channel>:<owner>`, unless the head is `caller`.
local function fair_turn(head, timeouts, channel, now, pttl, wait, free, publish, caller)
    if head == false then
        return;
    end;
    if free and head ~= caller then
        redis.call(publish, channel .. ':' .. head, '0');
    end;
    redis.call('zadd', timeouts, now + pttl + wait, head);
end;
