-- Write (or delete) a fenced value: only a token not older than the newest one the value has
-- seen gets through, and a token already used is accepted from the same holder only.
-- KEYS[1]  the value (STRING `name`)
-- KEYS[2]  its fence "redlatch_fence:{name}" (HASH: token -> newest token, holder -> who wrote with it)
-- ARGV[1]  the writer's fencing token (decimal, > 0)
-- ARGV[2]  the writer's holder id (the lock owner id)
-- ARGV[3]  "set" or "del"
-- ARGV[4]  the new value (for "set")
-- Reply:   {1, previous}  written (or deleted); previous = the newest token before (0 if none)
--          {0, newest}    rejected: newest > token, or newest == token written by another
--                         holder (a token handed out twice, after a failover lost its increment)
--          error WRONGTYPE  a key holds another type (checked before anything is written)
local kind = redis.call('type', KEYS[1])['ok'];
if kind ~= 'none' and kind ~= 'string' then
    return redis.error_reply('WRONGTYPE the fenced value is not a string');
end;
kind = redis.call('type', KEYS[2])['ok'];
if kind ~= 'none' and kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE the fence is not a hash');
end;
local token = tonumber(ARGV[1]);
local newest = 0;
local seen = redis.call('hget', KEYS[2], 'token');
if seen ~= false then
    newest = tonumber(seen);
    if newest == nil then
        return redis.error_reply('WRONGTYPE the fence token is not an integer');
    end;
end;
if token < newest or (token == newest and redis.call('hget', KEYS[2], 'holder') ~= ARGV[2]) then
    return {0, newest};
end;
redis.call('hset', KEYS[2], 'token', ARGV[1], 'holder', ARGV[2]);
if ARGV[3] == 'del' then
    redis.call('del', KEYS[1]);
else
    redis.call('set', KEYS[1], ARGV[4]);
end;
return {1, newest};
