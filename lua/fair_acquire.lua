-- Acquire (or re-enter) a fair lock, or join / keep a place in its queue (RedissonFairLock's
-- tryLockInnerAsync on the same keys; differences in the README's "Fair lock" section). With
-- ARGV[6] "0", RedissonNonReentrantFairLock's instead: an owner that holds the lock is refused
-- (after pruning dead heads, before any place in the queue is taken or kept).
-- KEYS[1]  lock name (HASH: owner -> hold count)
-- KEYS[2]  queue "redisson_lock_queue:{name}" (LIST of waiting owners)
-- KEYS[3]  timeouts "redisson_lock_timeout:{name}" (ZSET owner -> deadline ms)
-- KEYS[4]  channel prefix "redisson_lock__channel:{name}" (a waiter listens on "<prefix>:<owner>")
-- KEYS[5]  turn "redlatch_fair_turn:{name}" (HASH: the head whose turn runs, see fair_common.lua)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<client uuid>:<thread number>"
-- ARGV[3]  thread wait in milliseconds (how long a head may stay silent before it is skipped)
-- ARGV[4]  "0": only try; "1": join the queue at its tail when the lock cannot be taken;
--          "2": a later attempt of a waiter that joined: keep its place, and if it is gone
--          from the queue (a script popped it as a presumed-dead head while it was alive),
--          take back the head (and the lock, if it is free): everyone queued came after it
-- ARGV[5]  publish command (PUBLISH or SPUBLISH)
-- ARGV[6]  optional: "0" non-reentrant; absent or "1" reentrant
-- Reply:   nil                 acquired: a new hold (count 1), PEXPIRE lease (as Redisson's)
--          {count}             re-entered: hold count incremented to count >= 2, PEXPIRE lease
--                              (Redisson replies nil)
--          {0}                 non-reentrant, and the owner already holds the lock: its count
--                              untouched, not queued (Redisson replies the error
--                              NON_REENTRANT_REACQUIRE)
--          integer >= 1        not acquired: ms to wait at most before checking in again (the
--                              caller also wakes on its channel)
--          {ms, head}          not acquired, second in the queue: as above, and the caller also
--                              wakes on the head's channel "<prefix>:<head>"
--          error WRONGTYPE     a key holds another type (checked before anything is written)
local owner = ARGV[2];
local wait = tonumber(ARGV[3]);
local rejoin = ARGV[4] == '2';
-- HLEN first: a lock key of another type fails before anything is written.
local holds = redis.call('hlen', KEYS[1]);
local free = holds == 0;
local head, changed, now = fair_prune(KEYS[2], KEYS[3]);
if not free and redis.call('hexists', KEYS[1], owner) == 1 then
    -- Held by this owner, so never queued: taking the lock took it out of the queue, and a
    -- holder is refused or re-enters here, before the queue below.
    local reply, pttl = {0}, nil;
    if ARGV[6] == '0' then
        pttl = fair_pttl(KEYS[1], wait);
    else
        reply = {redis.call('hincrby', KEYS[1], owner, 1)};
        redis.call('pexpire', KEYS[1], ARGV[1]);
        pttl = tonumber(ARGV[1]);
    end;
    if changed then
        fair_turn(head, KEYS[3], KEYS[5], KEYS[4], now, pttl, wait, false, ARGV[5], owner);
    end;
    return reply;
end;
if free and (head == false or head == owner) then
    redis.call('hset', KEYS[1], owner, 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    if head == owner then
        -- The next waiter's deadline needs no update here: it checks in within half a
        -- thread wait, and its deadline is at least one thread wait beyond that.
        redis.call('lpop', KEYS[2]);
        redis.call('zrem', KEYS[3], owner);
        redis.call('del', KEYS[5]);
    end;
    return nil;
end;

local pos = redis.call('lpos', KEYS[2], owner);
if free and pos == false and rejoin then
    -- Popped while alive, and the lock is free: the head's place was ours, so is the lock.
    -- The head's turn, if it had begun, ends: it waits for this hold, with its chain back.
    redis.call('hset', KEYS[1], owner, 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    fair_turn(head, KEYS[3], KEYS[5], KEYS[4], now, tonumber(ARGV[1]), wait, false, ARGV[5], owner);
    return nil;
end;
local pttl = fair_pttl(KEYS[1], wait);
if changed or free then
    -- Dead heads were popped, or the lock is free (freed by a Redisson release, or its lease
    -- ran out): the head's turn starts, unless it runs already (woken if the lock is free).
    fair_turn(head, KEYS[3], KEYS[5], KEYS[4], now, pttl, wait, free, ARGV[5], owner);
end;
if pos == false then
    if ARGV[4] == '0' then
        return math.max(pttl, 1);
    elseif rejoin then
        redis.call('lpush', KEYS[2], owner);
        pos = 0;
        head = owner;
    else
        pos = redis.call('rpush', KEYS[2], owner) - 1;
    end;
end;
-- Joined or checked in: alive, so the deadline moves on (never back). At least what Redisson
-- gives a newcomer in this place: the deadline of the waiter ahead plus one thread wait (the
-- head's chain while its turn runs).
now = now or clock_ms();
local deadline = now + pttl + (pos + 1) * wait;
if pos > 0 then
    local ahead = fair_ahead(KEYS[2], KEYS[3], KEYS[5], pos - 1);
    if ahead ~= nil and ahead + wait > deadline then
        deadline = ahead + wait;
    end;
end;
fair_raise(KEYS[3], owner, deadline);

-- When to check in again without a message: every half thread wait at most, well before
-- the deadline; the head also when the lease may run out (its holder may have died: one
-- thread wait before its own deadline); the second as well, and, like everybody while the
-- lock is free, when the head may be presumed dead (a dead head's turn lasts one thread
-- wait: the first check-in after it pops the head and wakes the next).
local t = math.floor(wait / 2);
if pos == 0 then
    if pttl < t then
        t = pttl;
    end;
else
    local head_deadline = tonumber(redis.call('zscore', KEYS[3], head));
    if (pos == 1 or free) and head_deadline ~= nil and head_deadline - now < t then
        t = head_deadline - now;
    end;
    if pos == 1 and not free and pttl < t then
        t = pttl;
    end;
end;
if pos == 1 then
    -- The head's channel too: a Redisson release wakes the head alone, and moves no deadline.
    -- If the head is dead, the second's check-in on that message starts its turn.
    return {math.max(t, 1), head};
end;
return math.max(t, 1);
