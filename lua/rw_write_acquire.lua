-- Acquire (or re-enter) the write side of a read-write lock. Redisson's RedissonWriteLock.tryLockInnerAsync.
-- KEYS[1]  lock name (HASH: "mode" -> "read"/"write", reader owner -> hold count, "<owner>:write" -> count)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  the owner's writer field "<owner>:write"
-- Reply:   nil                 acquired the free lock: count 1, PEXPIRE lease (as Redisson's)
--          {count}             re-entered: write count + 1 = count, PEXPIRE at least the lease
--                              (Redisson replies nil)
--          integer             not acquired (readers, or another writer, hold it): the lock's PTTL
--                              in ms. A reader asking for the write side waits like anybody else,
--                              for every read hold including its own (no upgrade).
--          error WRONGTYPE     the key is not a read-write lock (nothing written)
local mode = redis.call('hget', KEYS[1], 'mode');
if mode == false then
    if redis.call('exists', KEYS[1]) == 1 then
        return redis.error_reply('WRONGTYPE key is a hash without a read-write lock mode');
    end;
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local count = redis.call('hincrby', KEYS[1], ARGV[2], 1);
    -- Redisson adds the lease to the remaining time; the longer of the two is enough.
    local remaining = redis.call('pttl', KEYS[1]);
    redis.call('pexpire', KEYS[1], math.max(remaining, tonumber(ARGV[1])));
    return {count};
end;
return redis.call('pttl', KEYS[1]);
