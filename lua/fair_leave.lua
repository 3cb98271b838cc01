-- A waiter gives up: remove it from the queue and the timeout set, and shift the deadlines of
-- those behind it by one thread wait (RedissonFairLock's acquireFailedAsync). If it was the
-- head, or the lock is free, the next waiter's turn starts (woken at once when the lock is
-- free, with one thread wait to take it), unless it runs already.
-- KEYS[1]  lock name
-- KEYS[2]  queue "redisson_lock_queue:{name}"
-- KEYS[3]  timeouts "redisson_lock_timeout:{name}"
-- KEYS[4]  channel prefix "redisson_lock__channel:{name}"
-- KEYS[5]  turn "redlatch_fair_turn:{name}" (HASH: the head whose turn runs, see fair_common.lua)
-- ARGV[1]  owner id
-- ARGV[2]  thread wait in milliseconds
-- ARGV[3]  publish command (PUBLISH or SPUBLISH)
-- Reply:   1                   the owner was queued and is removed
--          0                   the owner was not queued
--          error WRONGTYPE     a key holds another type
local wait = tonumber(ARGV[2]);
-- `now` is nil when nobody is queued: only a head's turn needs it.
local head, changed, now = fair_prune(KEYS[2], KEYS[3]);
local pos = redis.call('lpos', KEYS[2], ARGV[1]);
redis.call('zrem', KEYS[3], ARGV[1]);
if pos ~= false then
    local behind = redis.call('lrange', KEYS[2], pos + 1, -1);
    for i = 1, #behind do
        redis.call('zincrby', KEYS[3], -wait, behind[i]);
    end;
    redis.call('lrem', KEYS[2], 1, ARGV[1]);
    if pos == 0 then
        head = behind[1] or false;
        changed = true;
        redis.call('del', KEYS[5]);
    end;
end;
local pttl = fair_pttl(KEYS[1], wait);
local free = redis.call('exists', KEYS[1]) == 0;
if changed or free then
    fair_turn(head, KEYS[3], KEYS[5], KEYS[4], now, pttl, wait, free, ARGV[3], ARGV[1]);
end;
if pos == false then
    return 0;
end;
return 1;
