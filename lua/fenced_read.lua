-- Read a fenced value for update: fenced as a write is (see fence_common.lua, prepended), and
-- a read let through claims the fence for its token and holder, so that no older token can
-- write (or read for update) after it: a stale holder cannot slip a write between this
-- read and the reader's own write.
-- KEYS[1]  the value (STRING `name`)
-- KEYS[2]  its fence "redlatch_fence:{name}" (HASH: token -> newest token, holder -> who used it)
-- ARGV[1]  the reader's fencing token (decimal, > 0)
-- ARGV[2]  the reader's holder id (the lock owner id)
-- Reply:   {1, value}     read, fence claimed; value: the STRING, or nil if there is none
--          {0, newest}    rejected, nothing changed: newest > token, or newest == token used
--                         by another holder (a token handed out twice)
--          error WRONGTYPE  a key holds another type (checked before anything is written)
local verdict = fence_claim(KEYS[1], KEYS[2], ARGV[1], ARGV[2]);
if verdict[1] ~= 1 then
    return verdict;
end;
return {1, redis.call('get', KEYS[1])};
