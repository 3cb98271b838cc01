-- Write (or delete) a fenced value: only a token not older than the newest one the value has
-- seen gets through, and a token already used is accepted from the same holder only (see
-- fence_common.lua, prepended). The verdict is kept in the call's receipt, so that a call
-- sent again after its reply was lost gets the first one's verdict (a newer token may have
-- been used in between: the call must not be refused then if it was written).
-- KEYS[1]  the value (STRING `name`)
-- KEYS[2]  its fence "redlatch_fence:{name}" (HASH: token -> newest token, holder -> who used it)
-- KEYS[3]  the call's receipt "redisson_unlock_latch:{name}:<client uuid>-<n>" (STRING
--          "<1|0>:<token>", the verdict; kept ARGV[5] ms)
-- ARGV[1]  the writer's fencing token (decimal, > 0)
-- ARGV[2]  the writer's holder id (the lock owner id)
-- ARGV[3]  "set" or "del"
-- ARGV[4]  the new value (for "set")
-- ARGV[5]  the receipt's time to live in ms
-- Reply:   {1, previous}  written (or deleted); previous = the newest token before (0 if none)
--          {0, newest}    rejected: newest > token, or newest == token used by another
--                         holder (a token handed out twice, after a failover lost its increment)
--          the receipt's  the call was made before (its reply was lost): nothing changed
--          verdict
--          error WRONGTYPE  a key holds another type (checked before anything is written)
local made = redis.call('get', KEYS[3]);
if made then
    local ok, token = string.match(made, '^(%d):(%d+)$');
    return {tonumber(ok), tonumber(token)};
end;
local verdict = fence_claim(KEYS[1], KEYS[2], ARGV[1], ARGV[2]);
if verdict.err then
    return verdict;
end;
if verdict[1] == 1 then
    if ARGV[3] == 'del' then
        redis.call('del', KEYS[1]);
    else
        redis.call('set', KEYS[1], ARGV[4]);
    end;
end;
redis.call('set', KEYS[3], verdict[1] .. ':' .. verdict[2], 'px', ARGV[5]);
return verdict;
