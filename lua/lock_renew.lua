-- Renew the leases of many held locks in one call (the watchdog's batch).
-- KEYS[1..k]   lock names
-- ARGV[1]      lease in milliseconds
-- ARGV[2..k+1] owner id of each lock, in the order of KEYS
-- Reply:       array of k integers: 1 = the owner still holds KEYS[i] and its PEXPIRE was reset,
--              0 = not held by that owner any more (deleted, expired, taken, or not a hash):
--              its renewal stops and its guard is marked lost
local res = {};
for i, key in ipairs(KEYS) do
    local held = redis.pcall('hexists', key, ARGV[i + 1]);
    if held == 1 then
        redis.call('pexpire', key, ARGV[1]);
        res[i] = 1;
    else
        res[i] = 0;
    end;
end;
return res;
