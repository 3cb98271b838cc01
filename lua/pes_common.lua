-- Second prelude of every pes_*.lua script that writes (prepended by src/scripts.rs, after
-- lua/pes_check.lua): the permit-expirable semaphore's reclaim step, run before each
-- operation. Gives the permits whose expiry (ms on the server's clock) has come back to the
-- count and publishes the count if positive.
-- The first write, and the timeout set's type check: a set of another type fails it, with
-- nothing written. (`now`, 13 digits, goes as a Lua number prints: exactly.)
local reclaimed = redis.pcall('zremrangebyscore', KEYS[2], 0, now);
if type(reclaimed) == 'table' then
    -- Only a wrong type is ours to name; any other refusal (a replica's READONLY on a server
    -- before 7.0, which runs the script: the client tries again) goes back as it came.
    if string.sub(reclaimed.err, 1, 9) ~= 'WRONGTYPE' then
        return redis.error_reply(reclaimed.err);
    end;
    return redis.error_reply('WRONGTYPE the permit timeout key is not a sorted set');
end;
if reclaimed > 0 then
    count = redis.call('incrby', KEYS[1], reclaimed);
    if count > 0 then
        redis.call(ARGV[1], KEYS[3], int(count));
    end;
end;
