-- Who leads now: the leader record, if its owner still holds the election's lock.
-- KEYS[1]  the election's fenced lock "name" (HASH: owner -> hold count)
-- KEYS[2]  the leader "redlatch_election:{name}" (HASH: term, value, owner, since)
-- Reply:   {term, value, owner, since, pttl}   the leader; pttl: the lock's remaining lease (ms)
--          nil                                  nobody (no record, or its owner's hold is gone:
--                                               resigned, expired, or never proclaimed)
local rec = redis.call('hmget', KEYS[2], 'term', 'value', 'owner', 'since');
if rec[1] == false or rec[3] == false then
    return nil;
end;
if redis.call('hexists', KEYS[1], rec[3]) == 0 then
    return nil;
end;
return {rec[1], rec[2], rec[3], rec[4], redis.call('pttl', KEYS[1])};
