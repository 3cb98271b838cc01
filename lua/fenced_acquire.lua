-- Acquire (or re-enter) a fenced lock and take a fencing token. Same keys and semantics as
-- Redisson's RedissonFencedLock.tryLockInnerAsync (the token-returning variant): the token
-- counter is incremented on every acquire, re-entries included, and never expires. One
-- difference: a missing counter starts from the server's clock, not from 1 (see the reply).
-- KEYS[1]  lock name (HASH: owner -> hold count)
-- KEYS[2]  token counter "redisson_lock_token:{name}" (STRING, integer)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<client uuid>:<thread number>"
-- Reply:   {count, token}       acquired (or re-entered): hold count + 1 = count, PEXPIRE lease,
--                               token = INCR KEYS[2] (Redisson replies {-1, token}); a missing
--                               counter is first set to the server's TIME in microseconds
--                               (Redisson's starts again from 1), so tokens never go back
--                               after the counter is lost
--          integer              not acquired: the lock's PTTL in ms (-1 if the key has no expiry)
--          error WRONGTYPE      the lock key is not a hash or the token key not a non-negative
--                               integer string below 2^53 - 1
--                               (checked before anything is written)
local bad, kind = token_check(KEYS[2]);
if bad then
    return bad;
end;
if (redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1) then
    local token = token_next(KEYS[2], kind);
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return {count, token};
end;
return redis.call('pttl', KEYS[1]);
