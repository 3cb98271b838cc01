-- A leader says who it is: after the acquire of the election's fenced lock that made it leader
-- (ARGV[5] "new": a new term, logged), or later with a new value (ARGV[5] "value": same term).
-- KEYS[1]  the election's fenced lock "name" (HASH: owner -> hold count)
-- KEYS[2]  the leader "redlatch_election:{name}" (HASH: term, value, owner, since)
-- KEYS[3]  the log "redlatch_election_log:{name}" (STREAM of leaders: term, value, owner, since)
-- KEYS[4]  the channel "redlatch_election__channel:{name}"
-- ARGV[1]  the leader's owner id (its field in KEYS[1])
-- ARGV[2]  its term (the fencing token of its acquire)
-- ARGV[3]  its value
-- ARGV[4]  publish command (PUBLISH or SPUBLISH)
-- ARGV[5]  "new" or "value"
-- ARGV[6]  how many leaders the log keeps at least (XADD MAXLEN ~)
-- Reply:   1   done: KEYS[2] says so, and the term published on KEYS[4] ("new" also logged)
--          0   refused: the owner does not hold the lock, or ("value") KEYS[2] has another term
--          -1  refused ("new"): the owner holds the lock more than once (a second campaign of
--              one owner, re-entering: the first leads)
local now = clock_ms();
local holds = redis.call('hget', KEYS[1], ARGV[1]);
if holds == false then
    return 0;
end;
if ARGV[5] == 'new' and holds ~= '1' then
    return -1;
end;
if ARGV[5] == 'new' then
    redis.call('hset', KEYS[2], 'term', ARGV[2], 'value', ARGV[3], 'owner', ARGV[1], 'since', now);
    redis.call('xadd', KEYS[3], 'MAXLEN', '~', ARGV[6], '*',
        'term', ARGV[2], 'value', ARGV[3], 'owner', ARGV[1], 'since', now);
elseif redis.call('hget', KEYS[2], 'term') == ARGV[2] then
    redis.call('hset', KEYS[2], 'value', ARGV[3]);
else
    return 0;
end;
redis.call(ARGV[4], KEYS[4], ARGV[2]);
return 1;
