-- Renew many group-lock holds in one call (the watchdog's batch): Redisson's
-- FastMultilockTask.renew (renewal/FastMultilockTask.java, lines 78-104), on the server's
-- clock. Stricter than Redisson: a value whose expire_time has passed is not renewed back to
-- life (the hold is reported lost).
-- KEYS[1..k]  groups
-- ARGV[1]     lease in milliseconds
-- then, for each key in turn: the owner id, the number n of its values, and n value fields
-- Reply:      array of k integers: 1 = the owner still holds every value: each expire_time
--             raised to now + lease, the group's PEXPIRE to the lease if lower;
--             0 = not held (a value gone, expired, or taken; the key gone or not a hash)
local now = clock_ms();
local lease = tonumber(ARGV[1]);
local at = 2;
local res = {};
for k, key in ipairs(KEYS) do
    local owner = ARGV[at];
    local n = tonumber(ARGV[at + 1]);
    local held = true;
    for i = at + 2, at + 1 + n do
        if held then
            local holder = redis.pcall('hget', key, ARGV[i]);
            local expire = nil;
            if holder == owner then
                expire = tonumber(redis.call('hget', key, ARGV[i] .. ':' .. owner .. ':expire_time'));
            end;
            if expire == nil or expire < now then
                held = false;
            elseif expire < now + lease then
                redis.call('hset', key, ARGV[i] .. ':' .. owner .. ':expire_time', now + lease);
            end;
        end;
    end;
    if held then
        if redis.call('pttl', key) < lease then
            redis.call('pexpire', key, lease);
        end;
        res[k] = 1;
    else
        res[k] = 0;
    end;
    at = at + 2 + n;
end;
return res;
