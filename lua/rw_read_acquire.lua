-- Acquire (or re-enter) the read side of a read-write lock. Redisson's RedissonReadLock.tryLockInnerAsync.
-- KEYS[1]  lock name (HASH: "mode" -> "read"/"write", reader owner -> hold count, "<owner>:write" -> count)
-- KEYS[2]  the owner's hold-timeout prefix "{name}:<owner>:rwlock_timeout": hold n is the STRING
--          "<prefix>:<n>", with the hold's lease as PEXPIRE
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id "<client uuid>:<thread number>"
-- ARGV[3]  the owner's writer field "<owner>:write"
-- Reply:   nil                 acquired the free lock: count 1, its timeout key set, the lease
--                              set (as Redisson's reply)
--          {count}             acquired: hold count + 1 = count, its timeout key set, the hash's
--                              expiry raised to at least the lease (Redisson replies nil)
--          integer             not acquired (another owner writes): the lock's PTTL in ms
--          error WRONGTYPE     the key is not a read-write lock (nothing written)
local mode = redis.call('hget', KEYS[1], 'mode');
if mode == false then
    if redis.call('exists', KEYS[1]) == 1 then
        return redis.error_reply('WRONGTYPE key is a hash without a read-write lock mode');
    end;
    redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1);
    redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1]);
    redis.call('pexpire', KEYS[1], ARGV[1]);
    return nil;
end;
-- A writer may also read (downgrade); readers share.
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local n = redis.call('hincrby', KEYS[1], ARGV[2], 1);
    redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1]);
    local remaining = redis.call('pttl', KEYS[1]);
    redis.call('pexpire', KEYS[1], math.max(remaining, tonumber(ARGV[1])));
    return {n};
end;
return redis.call('pttl', KEYS[1]);
