-- Second prelude of every pes_*.lua script that writes (prepended by src/scripts.rs, after
-- lua/pes_check.lua): the permit-expirable semaphore's reclaim step, run before each
-- operation. Gives the permits whose expiry (ms on the server's clock) has come back to the
-- count and publishes the count if positive.
local reclaimed = redis.call('zremrangebyscore', KEYS[2], 0, int(now));
if reclaimed > 0 then
    count = redis.call('incrby', KEYS[1], reclaimed);
    if count > 0 then
        redis.call(ARGV[1], KEYS[3], int(count));
    end;
end;
