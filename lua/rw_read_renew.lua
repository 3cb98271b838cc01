-- Renew the leases of many read holds in one call (the watchdog's batch for read sides).
-- KEYS[2i-1]   lock name i (HASH, see rw_read_acquire.lua)
-- KEYS[2i]     the owner's hold-timeout prefix "{name}:<owner>:rwlock_timeout" for lock i
-- ARGV[1]      lease in milliseconds
-- ARGV[i+1]    owner id for lock i
-- Reply:       array of one integer per lock: 2 + ms = the owner's read holds (and only the
--              owner's: Redisson renews every reader's, which keeps dead readers alive) got
--              PEXPIRE lease and the hash's expiry was raised to at least the lease; ms is the
--              hash's expiry found before, which tells the client whether
--              another client cut it (Redisson's read-lock renewal sets it to that client's
--              lease); 1 = the same, the hash had no expiry; 0 = the owner holds no live read hold (released, expired or deleted, or
--              not a hash): the guard is lost
local res = {};
for i = 1, #KEYS / 2 do
    local name, prefix = KEYS[2 * i - 1], KEYS[2 * i];
    -- pcall and tonumber: a foreign or corrupt key reports 0 for its lock, not an error for all.
    local count = redis.pcall('hget', name, ARGV[i + 1]);
    res[i] = 0;
    if type(count) == 'string' and tonumber(count) ~= nil then
        local renewed = 0;
        for n = 1, math.min(tonumber(count), 10000) do
            renewed = renewed + redis.call('pexpire', prefix .. ':' .. n, ARGV[1]);
        end;
        if renewed > 0 then
            local remaining = redis.call('pttl', name);
            redis.call('pexpire', name, math.max(remaining, tonumber(ARGV[1])));
            if remaining >= 0 then
                res[i] = 2 + remaining;
            else
                res[i] = 1;
            end;
        end;
    end;
end;
return res;
