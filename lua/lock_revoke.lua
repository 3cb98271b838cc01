-- Ask the holder of a plain or fenced lock to release it, or preempt it: one attempt of a
-- preemptor (see revoke_common.lua for the record and the log).
-- KEYS[1]  lock name (HASH: owner -> hold count)
-- KEYS[2]  the revocation record "redlatch_revoke:{name}" (HASH)
-- KEYS[3]  optional: a fenced lock's token counter "redisson_lock_token:{name}"
-- ARGV[1]  "ask" (a request: the holder is told, nothing is enforced) or "take" (preempt)
-- ARGV[2]  who asks: the preemptor's owner id ("take"), or any name ("ask")
-- ARGV[3]  reason (may be empty)
-- ARGV[4]  "take": grace in ms after the holder is told (0: steal)
-- ARGV[5]  "take": the longest deferral in ms an unpreemptible section may add
-- ARGV[6]  "take": lease in ms of the hold the preemptor takes
-- Reply ("ask"):  the holder's owner id, told at its next renewal; nil when nobody holds the
--                 lock or the asker does
-- Reply ("take"): 0                 the lock is free or held by the preemptor: acquire it
--                 integer ms > 0     held; ask again within ms (the deadline of the force)
--                 {count, token, victim}  the victim's hold was released by force and the
--                                    lock given to the preemptor (count 1; token 0 for a lock
--                                    without tokens), before any waiter
--                 error WRONGTYPE    the lock is not a hash, or the token counter not an
--                                    integer (checked before anything is written); error ERR
--                                    several holders (not an exclusive lock)
-- A new request (another hold, another token, another asker) replaces the record, except one
-- that would replace another preemptor's pending force on the same hold: that one is waited
-- for ("take") or left as it is ("ask", still logged) until its deadline and a second more,
-- after which a preemptor that has not come (it died) is replaced.
local now = clock_ms();
local pttl = redis.call('pttl', KEYS[1]);
if pttl == -2 or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    if ARGV[1] == 'ask' then
        return nil;
    end;
    if redis.call('hget', KEYS[2], 'by') == ARGV[2] then
        -- This preemptor's request is over: the hold it was for is gone.
        revoke_forget(KEYS[2]);
    end;
    return 0;
end;
local holders = redis.call('hkeys', KEYS[1]);
if #holders ~= 1 then
    return redis.error_reply('ERR several holders: not an exclusive lock');
end;
local victim = holders[1];
local token, counter = '', nil;
if KEYS[3] ~= nil then
    local bad;
    bad, counter = token_check(KEYS[3]);
    if bad then
        return bad;
    end;
    token = redis.call('get', KEYS[3]) or '';
end;
local f = redis.call('hmget', KEYS[2], 'victim', 'token', 'by', 'grace', 'at', 'bound', 'defer',
    'noticed', 'calm:' .. victim);
local same_hold = f[1] == victim and f[2] == token;
local forcing = same_hold and f[4] ~= false and f[4] ~= '-1';
-- How long another preemptor's pending force is still its own: until its deadline and a
-- second more (one that gave up withdraws its request; one that died leaves it to lapse).
local others = 0;
if forcing and f[3] ~= ARGV[2] then
    local deadline = revoke_deadline({
        at = tonumber(f[5]), bound = tonumber(f[6]), grace = tonumber(f[4]),
        defer = tonumber(f[7]), noticed = tonumber(f[8]), calm = tonumber(f[9]) });
    others = deadline + 1000 - now;
end;
local event;
if ARGV[1] == 'ask' then
    event = 'request';
elseif tonumber(ARGV[4]) == 0 then
    event = 'steal';
else
    event = 'preempt';
end;
if not (same_hold and f[3] == ARGV[2]) then
    if others > 0 then
        -- Another preemptor's force is pending on this hold: it goes first.
        if ARGV[1] == 'ask' then
            revoke_log(KEYS[2], event, ARGV[2], victim, token, ARGV[3]);
            return victim;
        end;
        return others;
    end;
    local bound = pttl;
    if bound < 0 then
        bound = 0;
    end;
    local grace = -1;
    local defer = 0;
    if ARGV[1] == 'take' then
        grace = tonumber(ARGV[4]);
        defer = tonumber(ARGV[5]);
        if grace == 0 then
            bound = 0;
        end;
    end;
    redis.call('hdel', KEYS[2], 'noticed', 'forced');
    redis.call('hset', KEYS[2], 'victim', victim, 'token', token, 'by', ARGV[2],
        'reason', ARGV[3], 'at', now, 'bound', bound, 'grace', grace, 'defer', defer);
    -- Kept while the holder may still be told or forced, and a lease after (a forced hold's
    -- renewal reads it to learn why it was lost).
    local keep = bound + math.max(grace, 0) + defer + math.max(pttl, 30000);
    if redis.call('pttl', KEYS[2]) < keep then
        redis.call('pexpire', KEYS[2], keep);
    end;
    revoke_log(KEYS[2], event, ARGV[2], victim, token, ARGV[3]);
end;
if ARGV[1] == 'ask' then
    return victim;
end;
local r = redis.call('hmget', KEYS[2], 'at', 'bound', 'grace', 'defer', 'noticed', 'calm:' .. victim,
    'reason');
local deadline = revoke_deadline({
    at = tonumber(r[1]), bound = tonumber(r[2]), grace = tonumber(r[3]),
    defer = tonumber(r[4]), noticed = tonumber(r[5]), calm = tonumber(r[6]) });
if now < deadline then
    return deadline - now;
end;
-- The deadline passed with the same hold there: released by force, the lock given on.
redis.call('del', KEYS[1]);
-- `forced` for the record's request; `forced:<victim>` (who forced it) stays when a later
-- request replaces the record, until the victim's renewal has read it.
redis.call('hset', KEYS[2], 'forced', now, 'forced:' .. victim, ARGV[2]);
revoke_log(KEYS[2], 'forced', ARGV[2], victim, token, r[7]);
local taken = 0;
if KEYS[3] ~= nil then
    taken = token_next(KEYS[3], counter);
end;
redis.call('hset', KEYS[1], ARGV[2], 1);
redis.call('pexpire', KEYS[1], ARGV[6]);
return {1, taken, victim};
