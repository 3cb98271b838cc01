-- Acquire (or re-enter) a reentrant lock. Same semantics as Redisson's RedissonLock.tryLockInnerAsync
-- (whose reply is nil when acquired: ours tells the count, so a client learns when a hold it
-- believed it had was lost and this acquire made a new one).
-- KEYS[1]  lock name (HASH: owner -> hold count)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<client uuid>:<thread number>"
-- Reply:   {count}             acquired (or re-entered): the owner's count was incremented to
--                              count, PEXPIRE lease (count 1: a new hold)
--          integer             not acquired: the lock's PTTL in ms (-1 if the key has no expiry)
--          error WRONGTYPE     the key exists and is not a hash
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return {count};
end;
return redis.call('pttl', KEYS[1]);
