-- Renew many wait records (and index entries) in one call (the watchdog's batch): each
-- value's expiry becomes now + lease, its since and what it names kept (see wait_record.lua).
-- KEYS[1..k]   the HASHes ("redlatch_waits:{name}" or "redlatch_waiting:{client}")
-- ARGV[1]      lease in milliseconds
-- ARGV[2..k+1] the owner id of each, in the order of KEYS
-- Reply:       array of k integers, each 1: a record found gone was removed as its wait
--              ended (the lock granted, the wait given up) and is not written again; its
--              renewal stops when the waiter's does, so nothing is lost with it
local now = clock_ms();
local lease = tonumber(ARGV[1]);
local res = {};
for i, key in ipairs(KEYS) do
    local old = redis.pcall('hget', key, ARGV[i + 1]);
    if type(old) == 'string' then
        local _, _, rest = string.find(old, '^%d+ (.*)$');
        if rest then
            redis.call('hset', key, ARGV[i + 1], string.format('%d ', now + lease) .. rest);
            if redis.call('pttl', key) < lease then
                redis.call('pexpire', key, lease);
            end;
        end;
    end;
    res[i] = 1;
end;
return res;
