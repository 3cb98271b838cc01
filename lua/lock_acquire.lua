-- Acquire (or re-enter) a reentrant lock. Same semantics as Redisson's RedissonLock.tryLockInnerAsync
-- (whose reply is nil when acquired: ours is nil for a new hold and tells the count of a
-- re-entry, so a client learns when a hold it believed it had was lost and this acquire made a
-- new one; an array reply costs the server more than a whole read). With ARGV[3] "0", Redisson's
-- RedissonNonReentrantLock instead: an owner that holds the lock is refused, its count untouched.
-- KEYS[1]  lock name (HASH: owner -> hold count)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<client uuid>:<thread number>"
-- ARGV[3]  optional: "0" non-reentrant; absent or "1" reentrant
-- Reply:   nil                 acquired: a new hold (count 1), PEXPIRE lease
--          {count}             re-entered: the owner's count was incremented to count >= 2,
--                              PEXPIRE lease
--          {0}                 non-reentrant, and the owner already holds the lock: nothing
--                              changed (Redisson replies the error NON_REENTRANT_REACQUIRE)
--          integer             not acquired: the lock's PTTL in ms (-1 if the key has no expiry)
--          error WRONGTYPE     the key exists and is not a hash
-- PTTL tells both whether the lock exists (-2: it does not) and, when another owner holds
-- it, the reply: a refused acquire makes two calls where Redisson's makes three.
local pttl = redis.call('pttl', KEYS[1]);
if pttl ~= -2 then
    if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
        return pttl;
    end;
    if ARGV[3] == '0' then
        return {0};
    end;
end;
local count = redis.call('hincrby', KEYS[1], ARGV[2], 1);
redis.call('pexpire', KEYS[1], ARGV[1]);
if count == 1 then
    return nil;
end;
return {count};
