-- A waiter gives up: remove it from the queue and the timeout set, and shift the deadlines of
-- those behind it by one thread wait (RedissonFairLock's acquireFailedAsync). If it was the
-- head, the next waiter's turn starts (woken at once when the lock is free).
-- KEYS[1]  lock name
-- KEYS[2]  queue "redisson_lock_queue:{name}"
-- KEYS[3]  timeouts "redisson_lock_timeout:{name}"
-- KEYS[4]  channel prefix "redisson_lock__channel:{name}"
-- ARGV[1]  owner id
-- ARGV[2]  thread wait in milliseconds
-- ARGV[3]  publish command (PUBLISH or SPUBLISH)
-- Reply:   1                   the owner was queued and is removed
--          0                   the owner was not queued
--          error WRONGTYPE     a key holds another type
local now = fair_now();
local wait = tonumber(ARGV[2]);
local changed = fair_prune(KEYS[2], KEYS[3], now);
local pos = redis.call('lpos', KEYS[2], ARGV[1]);
redis.call('zrem', KEYS[3], ARGV[1]);
if pos ~= false then
    local behind = redis.call('lrange', KEYS[2], pos + 1, -1);
    for i = 1, #behind do
        redis.call('zincrby', KEYS[3], -wait, behind[i]);
    end;
    redis.call('lrem', KEYS[2], 1, ARGV[1]);
    changed = changed or pos == 0;
end;
if changed then
    fair_turn(KEYS[1], KEYS[2], KEYS[3], KEYS[4], now, wait, ARGV[3], ARGV[1]);
end;
if pos == false then
    return 0;
end;
return 1;
