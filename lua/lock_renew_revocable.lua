-- Renew the leases of many held plain or fenced locks in one call (the watchdog's batch), and
-- tell each holder of a revocation pending for it (see revoke_common.lua).
-- KEYS[2i-1]   lock name i
-- KEYS[2i]     its revocation record "redlatch_revoke:{name}"
-- ARGV[1]      lease in milliseconds
-- ARGV[i+1]    owner id of lock i
-- Reply:       array of one integer per lock:
--              1 = the owner still holds it and its PEXPIRE was reset;
--              -3 - at = the same, and the request made at `at` (ms, server clock) for this
--                   owner is pending: the holder is told of it (the first time, the record's
--                   `noticed` is set and the log says `notice`);
--              0 = not held by that owner any more (deleted, expired, taken, or not a hash);
--              -2 = not held: released by force by a preemptor (`forced:<owner>` says who)
local res = {};
local now = nil;
for i = 1, #KEYS / 2 do
    local key, rec, owner = KEYS[2 * i - 1], KEYS[2 * i], ARGV[i + 1];
    local held = redis.pcall('hexists', key, owner) == 1;
    if held then
        redis.call('pexpire', key, ARGV[1]);
    end;
    res[i] = held and 1 or 0;
    if redis.call('exists', rec) == 1 then
        if held then
            local f = redis.call('hmget', rec, 'victim', 'forced', 'noticed', 'by', 'token',
                'reason', 'at');
            if f[1] == owner and not f[2] then
                if not f[3] then
                    now = now or clock_ms();
                    redis.call('hset', rec, 'noticed', now);
                    revoke_log(rec, 'notice', f[4], owner, f[5], f[6]);
                end;
                -- Which request: the holder is told again when another replaces it.
                res[i] = -3 - tonumber(f[7]);
            end;
        elseif redis.call('hexists', rec, 'forced:' .. owner) == 1 then
            res[i] = -2;
        end;
    end;
end;
return res;
