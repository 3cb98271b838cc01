-- Prelude of fenced_write.lua and fenced_read.lua (prepended by src/scripts.rs).
-- fence_claim(value, fence, token, holder): lets a call with fencing token `token` (decimal,
-- > 0) from `holder` through if the token is not older than the newest one the fence has
-- seen, and a token already used only from the holder that used it first; a call let through
-- records its token and holder in the fence, so that every older token (and this one from
-- anybody else) is refused from then on.
-- `value`: the STRING of the value; `fence`: its HASH (token -> newest token, holder -> who
-- used it). Returns {1, previous} let through (previous: the newest token before, 0 if none);
-- {0, newest} refused (newest > token, or newest == token used by another holder: a token
-- handed out twice, after a failover lost its increment); error WRONGTYPE a key holds
-- another type (checked before anything is written).
local function fence_claim(value, fence, token, holder)
    local kind = redis.call('type', value)['ok'];
    if kind ~= 'none' and kind ~= 'string' then
        return redis.error_reply('WRONGTYPE the fenced value is not a string');
    end;
    kind = redis.call('type', fence)['ok'];
    if kind ~= 'none' and kind ~= 'hash' then
        return redis.error_reply('WRONGTYPE the fence is not a hash');
    end;
    local newest = 0;
    local seen = redis.call('hget', fence, 'token');
    if seen ~= false then
        newest = tonumber(seen);
        if newest == nil then
            return redis.error_reply('WRONGTYPE the fence token is not an integer');
        end;
    end;
    local mine = tonumber(token);
    if mine < newest or (mine == newest and redis.call('hget', fence, 'holder') ~= holder) then
        return {0, newest};
    end;
    redis.call('hset', fence, 'token', token, 'holder', holder);
    return {1, newest};
end;
