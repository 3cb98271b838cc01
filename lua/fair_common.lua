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
-- - Our scripts lower a deadline in two cases only: by a leaver's thread wait, as Redisson's
--   acquireFailedAsync does, and the head's when its turn starts with the lock free (a release,
--   a force-unlock, the heads ahead of it popped or gone, or a script of ours finding the lock
--   freed by a Redisson release or an expired lease): it then has one thread wait from now to
--   take the lock (a live head takes it within milliseconds of its message), so that a dead
--   head costs one thread wait after the release, not its lease. The deadline it had (its
--   chain) is kept in the turn key (HASH `owner`, `chain`, `until`: the head, the deadline it
--   had, its turn's deadline), and our joiners chain on it, not on the turn's: behind a Redisson
--   head's tryLock(1 hour) they still carry the hour that its acquire takes off. A turn is
--   started once (a script that finds it running leaves it), and when the lock is taken while
--   it runs (by a popped waiter of ours taking back its place) the head gets its chain back.
--   The turn key is valid while it names the head and the head's deadline is still `until`
--   (Redisson never moves the head's deadline: it only lowers those behind a leaver, and all
--   but its acquirer's); it expires with the turn.

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
-- if the queue is empty), whether any head was popped, and the server's time in ms, read
-- only when somebody is queued (nil otherwise): reading the clock costs the server more than
-- a whole uncontended acquire's other calls, and a script that finds nobody queued mostly
-- needs no time.
local function fair_prune(queue, timeouts)
    local changed, now = false, nil;
    while true do
        local head = redis.call('lindex', queue, 0);
        if head == false then
            return false, changed, now;
        end;
        now = now or clock_ms();
        local deadline = tonumber(redis.call('zscore', timeouts, head));
        if deadline ~= nil and deadline > now then
            return head, changed, now;
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

-- The chain of `head`: the deadline it had before its running turn started, or nil when no
-- turn of `head` runs (the turn key names another owner, or the head's deadline moved).
local function fair_chain(turn, timeouts, head)
    local t = redis.call('hmget', turn, 'owner', 'chain', 'until');
    if t[1] ~= head or tonumber(redis.call('zscore', timeouts, head)) ~= tonumber(t[3]) then
        return nil;
    end;
    return tonumber(t[2]);
end;

-- The deadline a newcomer chains on, of the waiter at `pos` (false if none): the head's
-- chain while its turn runs, else its deadline.
local function fair_ahead(queue, timeouts, turn, pos)
    local ahead = redis.call('lindex', queue, pos);
    if ahead == false then
        return nil;
    end;
    local deadline = tonumber(redis.call('zscore', timeouts, ahead));
    if pos == 0 then
        local chain = fair_chain(turn, timeouts, ahead);
        if chain ~= nil and (deadline == nil or chain > deadline) then
            return chain;
        end;
    end;
    return deadline;
end;

-- Starts the turn of `head` (false: nobody queued).
-- With the lock `free`: unless a turn of `head` runs already, '0' is published on the head's
-- own channel `<channel>:<owner>` (but to the `caller`), and its deadline becomes now + wait,
-- its chain kept in the turn key.
-- With the lock held: the head's deadline becomes at least now + `pttl` (the lock's remaining
-- lease as fair_pttl gives it) + wait, and at least its chain if a turn of it ran (a later one,
-- such as a Redisson waiter's long tryLock wait, is kept).
local function fair_turn(head, timeouts, turn, channel, now, pttl, wait, free, publish, caller)
    if head == false then
        return;
    end;
    local chain = fair_chain(turn, timeouts, head);
    if free then
        if chain ~= nil then
            return;
        end;
        if head ~= caller then
            redis.call(publish, channel .. ':' .. head, '0');
        end;
        local had = tonumber(redis.call('zscore', timeouts, head)) or 0;
        local ends = now + wait;
        redis.call('zadd', timeouts, ends, head);
        redis.call('del', turn);
        redis.call('hset', turn, 'owner', head, 'chain', math.max(had, ends), 'until', ends);
        redis.call('pexpire', turn, wait + 1000);
        return;
    end;
    local deadline = now + pttl + wait;
    if chain ~= nil then
        redis.call('del', turn);
        redis.call('zadd', timeouts, math.max(chain, deadline), head);
        return;
    end;
    fair_raise(timeouts, head, deadline);
end;
