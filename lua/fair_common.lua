-- Helpers shared by the fair lock scripts: prepended to each fair_*.lua (see src/scripts.rs).
--
-- The queue (LIST) holds waiting owners in arrival order; the timeout set (ZSET) maps each of
-- them to a deadline in ms. A head whose deadline passed is presumed dead and popped (and the
-- next one too, if its deadline passed as well); only heads are ever popped.
--
-- Our deadlines, on the server's clock (TIME), and what Redisson's scripts do to them:
-- - A redlatch waiter's deadline is, at its join and at each check-in (every half thread wait
--   at most), the largest of: what it had, the lock's expiry (now if free) plus one thread wait
--   per place up to and including its own, and the deadline of the waiter ahead of it plus one
--   thread wait (what Redisson gives a newcomer there). A check-in never lowers it.
-- - Redisson does not move a waiter's deadline after its join (it uses its client's clock).
--   When a Redisson waiter takes the lock it lowers every deadline by the wait it asked for
--   (tryLock's wait, else its thread wait); when one gives up it lowers those behind it by
--   the same (RedissonFairLock: tryLockInnerAsync, acquireFailedAsync). A waiter chained on the
--   one ahead survives such a decrement as long as that one's wait covered its stay in the
--   queue; a Redisson waiter that stayed longer (or gave up after a wait longer than the thread
--   wait) can push the deadlines behind it into the past, Redisson's own waiters' included.
-- - A redlatch waiter popped that way while alive finds itself gone at its next check-in and
--   takes back the head of the queue (acquire ARGV[4] "2"): ahead of everyone queued, who all
--   came after it. Only an owner that took the lock meanwhile comes first, and several
--   waiters popped together come back in the order they check in. (The client sends "2" only
--   for an owner that is one thread, and not on its last attempt before it leaves.)
-- - Our scripts never lower a deadline except by a leaver's thread wait, as Redisson's
--   acquireFailedAsync does: a head's turn raises its deadline, never lowers it.

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

-- Sets `owner`'s deadline to `deadline` unless it has a later one already. Returns the
-- deadline it has.
local function fair_raise(timeouts, owner, deadline)
    local had = tonumber(redis.call('zscore', timeouts, owner));
    if had ~= nil and had >= deadline then
        return had;
    end;
    redis.call('zadd', timeouts, deadline, owner);
    return deadline;
end;

-- Starts the turn of `head` (false: nobody queued): its deadline becomes at least now +
-- `pttl` (the lock's remaining lease as fair_pttl gives it) + wait (a later one, such as a
-- Redisson waiter's long tryLock wait, is kept), and when the lock is `free` '0' is published
-- on the head's own channel `<channel>:<owner>`, unless the head is `caller`.
local function fair_turn(head, timeouts, channel, now, pttl, wait, free, publish, caller)
    if head == false then
        return;
    end;
    if free and head ~= caller then
        redis.call(publish, channel .. ':' .. head, '0');
    end;
    fair_raise(timeouts, head, now + pttl + wait);
end;
