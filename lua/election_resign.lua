-- A leader steps down: the leader record goes (if it is still this term's) and "0" is
-- published, before the lock is released (by its own unlock, sent next).
-- KEYS[1]  the leader "redlatch_election:{name}" (HASH)
-- KEYS[2]  the channel "redlatch_election__channel:{name}"
-- ARGV[1]  the leader's term
-- ARGV[2]  publish command (PUBLISH or SPUBLISH)
-- Reply:   1   the record was this term's: deleted, "0" published
--          0   another term's (or none): nothing changed
if redis.call('hget', KEYS[1], 'term') ~= ARGV[1] then
    return 0;
end;
redis.call('del', KEYS[1]);
redis.call(ARGV[2], KEYS[2], '0');
return 1;
