-- Acquire (or re-enter) a reentrant lock. Same semantics as Redisson's RedissonLock.tryLockInnerAsync
-- (whose reply is nil when acquired: ours tells the count, so a client learns when a hold it
-- believed it had was lost and this acquire made a new one). With ARGV[3] "0", Redisson's
-- RedissonNonReentrantLock instead: an owner that holds the lock is refused, its count untouched.
-- KEYS[1]  lock name (HASH: owner -> hold count)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<client uuid>:<thread number>"
-- ARGV[3]  optional: "0" non-reentrant; absent or "1" reentrant
-- Reply:   {count}             acquired (or re-entered): the owner's count was incremented to
--                              count, PEXPIRE lease (count 1: a new hold)
--          {0}                 non-reentrant, and the owner already holds the lock: nothing
--                              changed (Redisson replies the error NON_REENTRANT_REACQUIRE)
--          integer             not acquired: the lock's PTTL in ms (-1 if the key has no expiry)
--          error WRONGTYPE     the key exists and is not a hash
if redis.call('exists', KEYS[1]) == 1 then
    if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
        return redis.call('pttl', KEYS[1]);
    end;
    if ARGV[3] == '0' then
        return {0};
    end;
end;
local count = redis.call('hincrby', KEYS[1], ARGV[2], 1);
redis.call('pexpire', KEYS[1], ARGV[1]);
return {count};
