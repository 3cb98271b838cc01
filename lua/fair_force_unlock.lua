-- Delete a fair lock whoever holds it and wake the head of the queue
-- (RedissonFairLock's forceUnlockAsync on the same keys).
-- KEYS[1]  lock name
-- KEYS[2]  queue "redisson_lock_queue:{name}"
-- KEYS[3]  timeouts "redisson_lock_timeout:{name}"
-- KEYS[4]  channel prefix "redisson_lock__channel:{name}"
-- KEYS[5]  turn "redlatch_fair_turn:{name}" (HASH: the head whose turn runs, see fair_common.lua)
-- ARGV[1]  publish command (PUBLISH or SPUBLISH)
-- ARGV[2]  thread wait in milliseconds
-- Reply:   1                   the lock existed and was deleted; '0' published on the head's channel,
--                              whose turn starts: one thread wait from now to take the lock
--          0                   there was no lock
--          error WRONGTYPE     the lock key holds another type: it is left alone
local t = redis.call('type', KEYS[1]).ok;
if t ~= 'hash' and t ~= 'none' then
    return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value');
end;
local wait = tonumber(ARGV[2]);
-- `now` is nil when nobody is queued: only a head's turn needs it.
local head, changed, now = fair_prune(KEYS[2], KEYS[3]);
local deleted = redis.call('del', KEYS[1]);
if deleted == 1 or changed then
    fair_turn(head, KEYS[3], KEYS[5], KEYS[4], now, 0, wait, true, ARGV[1], '');
end;
return deleted;
