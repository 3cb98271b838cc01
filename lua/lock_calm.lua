-- A holder's own steps on a revocation record (see revoke_common.lua): begin or end an
-- unpreemptible section (a preemptor's deadline moves to the section's end, by at most the
-- deferral it accepts), or, once a told holder has released, forget the request for it (so
-- that its next hold is a new one to any preemptor, as a fenced lock's new token tells).
-- KEYS[1]  lock name (HASH: owner -> hold count)
-- KEYS[2]  the revocation record "redlatch_revoke:{name}"
-- ARGV[1]  owner id
-- ARGV[2]  the section's longest length in ms; "0" ends it; "done" forgets the request;
--          "withdraw": a preemptor that gave up withdraws its request (ARGV[1] its id)
-- Reply:   1 done; 0 not done: the owner does not hold the lock (a section), or holds it
--          again, or the record is for another hold ("done"), or another asker's or forced
--          already ("withdraw")
if ARGV[2] == 'withdraw' then
    if redis.call('hget', KEYS[2], 'by') ~= ARGV[1] or redis.call('hexists', KEYS[2], 'forced') == 1 then
        return 0;
    end;
    revoke_forget(KEYS[2]);
    return 1;
end;
local held = redis.pcall('hexists', KEYS[1], ARGV[1]) == 1;
if ARGV[2] == 'done' then
    if held or redis.call('hget', KEYS[2], 'victim') ~= ARGV[1]
        or redis.call('hexists', KEYS[2], 'forced') == 1 then
        return 0;
    end;
    revoke_forget(KEYS[2]);
    return 1;
end;
if not held then
    return 0;
end;
local field = 'calm:' .. ARGV[1];
local ms = tonumber(ARGV[2]);
if ms == 0 then
    redis.call('hdel', KEYS[2], field);
    return 1;
end;
redis.call('hset', KEYS[2], field, clock_ms() + ms);
if redis.call('pttl', KEYS[2]) < ms then
    redis.call('pexpire', KEYS[2], ms);
end;
return 1;
