-- What the scripts of a revocation share (prepended after clock.lua, see src/scripts.rs): the
-- record of the one revocation pending on a lock, and the lock's log of revocations.
--
-- The record, HASH `redlatch_revoke:{name}` (in the lock's slot):
--   victim   the owner id (hash field) of the hold it is for
--   token    the fencing token that hold had when asked (fenced lock), else ''
--   by       who asked (a preemptor's owner id, or an operator's name)
--   reason   why, as given
--   at       when it was asked (server clock, ms)
--   bound    how long a live holder of ours may take to be told: the lock's TTL when asked
--            (a holder's watchdog renews before its lease runs out, and a renewal tells it);
--            0 for a steal
--   grace    ms the holder has after it is told (-1: a request only, never enforced)
--   defer    ms the preemptor accepts its deadline to move for an unpreemptible section
--   noticed  when the holder's renewal told it (server clock, ms)
--   forced   when the hold was released by force (server clock, ms)
--   forced:<owner>  who released <owner>'s hold by force: kept when a later request replaces
--            the record, so that the victim's renewal still learns why its hold is gone
--   calm:<owner>  the end of an unpreemptible section of <owner> (server clock, ms)
-- The log, a capped STREAM `redlatch_revokes:{name}`, one entry per request, notice, forced
-- release and steal: `event`, `by`, `whom`, `token`, `reason`.
--
-- revoke_log(rec, event, by, whom, token, reason)  adds one entry to the log of the record rec
-- revoke_deadline(r)  when a pending preemption r (fields by name) may release by force
-- revoke_forget(rec)  deletes the request of the record rec (its holders' sections and
--                     `forced:<owner>` stay)

local REVOKE_LOG_MAX = 1000;

local function revoke_log(rec, event, by, whom, token, reason)
    -- The log's key is the record's with an `s`: same hash tag, same slot.
    local log = 'redlatch_revokes' .. string.sub(rec, 16);
    redis.call('xadd', log, 'MAXLEN', '~', REVOKE_LOG_MAX, '*', 'event', event, 'by', by,
        'whom', whom, 'token', token or '', 'reason', reason or '');
end;

local function revoke_forget(rec)
    redis.call('hdel', rec, 'victim', 'token', 'by', 'reason', 'at', 'bound', 'grace', 'defer',
        'noticed', 'forced');
end;

local function revoke_deadline(r)
    local told = r.at + r.bound;
    if r.noticed ~= nil and r.noticed < told then
        told = r.noticed;
    end;
    local deadline = told + r.grace;
    if r.calm ~= nil and r.calm > deadline then
        deadline = math.min(r.calm, deadline + r.defer);
    end;
    return deadline;
end;
