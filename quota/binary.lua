-- binary.lua: the fixed-width fields of a window's meta (log.lua says what
-- they hold) and of a token bucket's state and span (bucket.lua), packed
-- and unpacked in one C call each by the struct library that Redis's Lua
-- carries.
--
-- Provides: spack(fmt, ...), sunpack(fmt, s, pos), META (the meta's
-- fields), HEAD (their length, "#3:" included), PZ (where the pause field
-- starts), BUFFER (the most closed slices a meta holds, and how many one
-- push takes to the log), ENTRY (an entry of the log, and a closed slice);
-- BUCKET, BUCKET_LEN, TAGGED, UNKNOWN, SPAN, SPAN_LEN (a bucket's).
-- Needs: nothing; it comes first, or after clock.lua.
--
-- Only values are defined here, no functions: every script runs this part
-- at each call, and a function defined is a closure made (bucket.lua's
-- come after the common decisions, which need none of them).
--
-- Every field is a big-endian 8-byte integer ("i8"; Lua's doubles hold
-- them exactly up to 2^53) but the count of closed slices ("B", a byte).
-- An entry is an instant and units, as the meta's first two fields (the
-- open slice's latest call and units) are: closing the open slice copies
-- their 16 bytes, and a push copies the closed slices' bytes, with no
-- number made a string.
-- The numbers the caller sends as decimal strings (ARGV's units, rooms,
-- instants, TIME's reply) are read by arithmetic, ARGV[i] + 0, in the
-- common paths: that converts the string once, where tonumber converts it
-- twice (it checks the string is a number, then converts it), each time a
-- strtod.
-- Lua without the struct library (miniredis, the embedded Redis) gets the
-- same encoding written in Lua, for exactly these formats.

local META = '>i8i8i8i8Bi8i8i8i8i8i8'
local ENTRY = '>i8i8'
local HEAD = 3 + 81 -- "#3:", ten fields of 8 bytes, one of 1
local PZ = 3 + 33 + 8 + 1 -- the pause field, after at, units, sum, end, closed, until
local BUFFER = 8

-- A token bucket's state (bucket.lua): "#3r:" then five such integers.
-- UNKNOWN marks its units at tail as no longer known.
local BUCKET = '>i8i8i8i8i8'
local BUCKET_LEN = 4 + 40
-- The same state with its tag, read or written whole in one call (a tag
-- cut off or joined on is one more string made).
local TAGGED = '>c4i8i8i8i8i8'
local UNKNOWN = 2 ^ 52

-- A bucket's span (quota's prepared.go): "r", then big-endian 8-byte
-- integers: the period (µs), the refill, and the lengths of its state
-- key's start that name its bucket ("<prefix>{S}:B:") and its scope
-- ("<prefix>{S}:"), after which its pause keys are named; then a byte, 1
-- when it refunds as its upstream does (bucket.lua's bucket_return).
local SPAN = '>i8i8i8i8B'
local SPAN_LEN = 1 + 33

local spack, sunpack
local lib = rawget(_G, 'struct') -- rawget: scripts may not name missing globals
if lib then
  spack, sunpack = lib.pack, lib.unpack
else
  -- The formats above only: '>' then 'i8', 'B' and 'c4' items, values 0
  -- to 2^53.
  spack = function(fmt, ...)
    local out, arg = {}, 1
    for f in string.gmatch(string.sub(fmt, 2), '%a%d*') do
      local x = select(arg, ...)
      arg = arg + 1
      if f == 'B' then
        out[#out + 1] = string.char(x)
      elseif f == 'c4' then
        out[#out + 1] = string.sub(x, 1, 4)
      else
        local b = {}
        for k = 8, 1, -1 do
          b[k] = x % 256
          x = math.floor(x / 256)
        end
        out[#out + 1] = string.char(unpack(b))
      end
    end
    return table.concat(out)
  end
  sunpack = function(fmt, s, pos)
    pos = pos or 1
    local out = {}
    for f in string.gmatch(string.sub(fmt, 2), '%a%d*') do
      if f == 'B' then
        if pos > #s then error('data string too short') end
        out[#out + 1] = string.byte(s, pos)
        pos = pos + 1
      elseif f == 'c4' then
        if pos + 3 > #s then error('data string too short') end
        out[#out + 1] = string.sub(s, pos, pos + 3)
        pos = pos + 4
      else
        if pos + 7 > #s then error('data string too short') end
        local x, negative = 0, string.byte(s, pos) >= 128
        for k = pos, pos + 7 do
          local b = string.byte(s, k)
          if negative then b = 255 - b end -- two's complement, exactly
          x = x * 256 + b
        end
        if negative then x = -x - 1 end
        out[#out + 1] = x
        pos = pos + 8
      end
    end
    out[#out + 1] = pos
    return unpack(out)
  end
end
