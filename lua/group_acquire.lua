-- Acquire (or re-enter) a group lock: Redisson's RedissonFasterMultiLock.tryLockInnerAsync
-- (RedissonFasterMultiLock.java, lines 376-427): all of the values or none, on the server's
-- clock (Redisson's client sends its own). One difference: an owner whose own hold of a value
-- had run out (its fields left behind in a hash that others keep alive) starts that value's
-- count again at 1, where Redisson adds to the stale count.
-- KEYS[1]  group (HASH: field -> owner; field:owner:expire_time -> ms since the epoch;
--          field:owner:lock_count -> holds), field = Redisson's hash of an encoded value
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner id
-- ARGV[3..] the value fields, the one whose count is replied first
-- Reply:   {count}   acquired: every value names the owner, its expire_time is at least now +
--                    lease, its lock_count went up by one (count: the first value's); the
--                    group's PEXPIRE raised to the lease (set, for a new group)
--          nil       the same, count 1 (a new hold: as Redisson's reply, which an array's
--                    costs the server more than)
--          integer   not acquired: ms until the latest expire_time of a value another owner
--                    holds (nothing changed)
--          error WRONGTYPE  the key exists and is not a hash
local now = clock_ms();
local lease = tonumber(ARGV[1]);
local owner = ARGV[2];
local exists = redis.call('exists', KEYS[1]) == 1;
if exists then
    local latest = -1;
    for i = 3, #ARGV do
        local holder = redis.call('hget', KEYS[1], ARGV[i]);
        if holder ~= false and holder ~= owner then
            local expire = tonumber(redis.call('hget', KEYS[1], ARGV[i] .. ':' .. holder .. ':expire_time'));
            if expire ~= nil and expire > now and expire > latest then
                latest = expire;
            end;
        end;
    end;
    if latest ~= -1 then
        return latest - now;
    end;
end;
local count = 0;
for i = 3, #ARGV do
    local held = ARGV[i] .. ':' .. owner;
    local expire = tonumber(redis.call('hget', KEYS[1], held .. ':expire_time'));
    local n = 1;
    if expire == nil or expire < now then
        -- A new hold of the value (or one whose time ran out: its count starts again): what
        -- Redisson writes in four calls (owner, expiry, a count reset and its increment), in
        -- one; each write costs the server more than a read.
        redis.call('hset', KEYS[1], ARGV[i], owner, held .. ':expire_time', now + lease,
            held .. ':lock_count', 1);
    else
        if expire < now + lease then
            redis.call('hset', KEYS[1], ARGV[i], owner, held .. ':expire_time', now + lease);
        else
            redis.call('hset', KEYS[1], ARGV[i], owner);
        end;
        n = redis.call('hincrby', KEYS[1], held .. ':lock_count', 1);
    end;
    if i == 3 then
        count = n;
    end;
end;
if exists then
    -- PTTL reads the live clock, EXISTS the script's start: a key expiring as this script
    -- runs exists here with a PTTL of 0, and must be given the lease too, or it goes with
    -- the hold just taken.
    local ttl = redis.call('pttl', KEYS[1]);
    if ttl >= 0 and lease > ttl then
        redis.call('pexpire', KEYS[1], lease);
    end;
else
    redis.call('pexpire', KEYS[1], lease);
end;
if count == 1 then
    return nil;
end;
return {count};
