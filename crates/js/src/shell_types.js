// MongoDB's shell types for server-side JavaScript, and the helpers of shell_helpers.js
// on first use. Evaluated once per sandbox; the value of the script is a function that
// installs them on the global object it is given (with the host's loader of the
// helpers and their natives) and returns the list of internals that the BSON conversion
// needs (prototypes to recognise typed values by,
// constructors to build Dates and RegExps) and the emit factory, which user code never
// sees. The function is not wrapped in parentheses: QuickJS scans a
// parenthesised expression ahead for an arrow function, which would double the parsing
// of this file, and a sandbox is made for every command.
0, function (global, loadHelpers) {
  "use strict";
  function define(name, value) {
    Object.defineProperty(global, name, { value: value, writable: false, enumerable: false, configurable: false });
  }
  function pad(text, width) {
    while (text.length < width) text = "0" + text;
    return text;
  }

  var counter = Math.floor(Math.random() * 0xffffff);
  function ObjectId(hex) {
    if (!(this instanceof ObjectId)) return new ObjectId(hex);
    if (hex === undefined) {
      counter = (counter + 1) % 0x1000000;
      hex = pad(Math.floor(Date.now() / 1000).toString(16), 8) +
        pad(Math.floor(Math.random() * 0x10000000000).toString(16), 10) + pad(counter.toString(16), 6);
    }
    hex = String(hex);
    if (!/^[0-9a-fA-F]{24}$/.test(hex)) throw new Error("invalid ObjectId: " + hex);
    this.str = hex.toLowerCase();
  }
  ObjectId.prototype.toString = ObjectId.prototype.tojson = function () { return 'ObjectId("' + this.str + '")'; };
  ObjectId.prototype.toHexString = ObjectId.prototype.valueOf = function () { return this.str; };
  ObjectId.prototype.equals = function (other) { return other instanceof ObjectId && other.str === this.str; };
  ObjectId.prototype.getTimestamp = function () { return new Date(parseInt(this.str.slice(0, 8), 16) * 1000); };

  // As in the legacy shell: floatApprox, plus top and bottom (the two 32-bit halves) when
  // the value is beyond a double's exact integers.
  function NumberLong(value) {
    if (!(this instanceof NumberLong)) return new NumberLong(value);
    var exact = BigInt.asIntN(64, BigInt(typeof value === "number" ? Math.trunc(value) : (value === undefined ? 0 : value)));
    this.floatApprox = Number(exact);
    if (exact > 9007199254740991n || exact < -9007199254740991n) {
      this.top = Number(BigInt.asIntN(32, exact >> 32n));
      this.bottom = Number(BigInt.asUintN(32, exact));
    }
  }
  function exactLong(long) {
    return long.top === undefined ? BigInt(long.floatApprox) : (BigInt(long.top) << 32n) | BigInt(long.bottom);
  }
  NumberLong.prototype.valueOf = NumberLong.prototype.toNumber = function () { return this.floatApprox; };
  NumberLong.prototype.toString = NumberLong.prototype.tojson = function () {
    var text = exactLong(this).toString();
    return this.top === undefined ? "NumberLong(" + text + ")" : 'NumberLong("' + text + '")';
  };
  NumberLong.prototype.equals = function (other) { return other instanceof NumberLong && exactLong(other) === exactLong(this); };

  function NumberInt(value) {
    if (!(this instanceof NumberInt)) return new NumberInt(value);
    this.value = Number(value === undefined ? 0 : value) | 0;
  }
  NumberInt.prototype.valueOf = NumberInt.prototype.toNumber = function () { return this.value; };
  NumberInt.prototype.toString = NumberInt.prototype.tojson = function () { return "NumberInt(" + this.value + ")"; };

  function NumberDecimal(value) {
    if (!(this instanceof NumberDecimal)) return new NumberDecimal(value);
    this.value = String(value === undefined ? 0 : value);
  }
  NumberDecimal.prototype.valueOf = NumberDecimal.prototype.toNumber = function () { return Number(this.value); };
  NumberDecimal.prototype.toString = NumberDecimal.prototype.tojson = function () { return 'NumberDecimal("' + this.value + '")'; };

  function BinData(subtype, base64) {
    if (!(this instanceof BinData)) return new BinData(subtype, base64);
    this.type = Number(subtype);
    this.data = String(base64);
  }
  BinData.prototype.subtype = function () { return this.type; };
  BinData.prototype.base64 = function () { return this.data; };
  BinData.prototype.toString = BinData.prototype.tojson = function () { return 'BinData(' + this.type + ',"' + this.data + '")'; };

  function Timestamp(t, i) {
    if (!(this instanceof Timestamp)) return new Timestamp(t, i);
    this.t = Number(t === undefined ? 0 : t);
    this.i = Number(i === undefined ? 0 : i);
  }
  Timestamp.prototype.getTime = function () { return this.t; };
  Timestamp.prototype.getInc = function () { return this.i; };
  Timestamp.prototype.toString = Timestamp.prototype.tojson = function () { return "Timestamp(" + this.t + ", " + this.i + ")"; };

  function MinKey() { return minKey; }
  function MaxKey() { return maxKey; }
  var minKey = Object.create(MinKey.prototype);
  var maxKey = Object.create(MaxKey.prototype);
  MinKey.prototype.toString = MinKey.prototype.tojson = function () { return "MinKey"; };
  MaxKey.prototype.toString = MaxKey.prototype.tojson = function () { return "MaxKey"; };

  function ISODate(text) { return text === undefined ? new Date() : new Date(text); }

  define("ObjectId", ObjectId);
  define("NumberLong", NumberLong);
  define("NumberInt", NumberInt);
  define("NumberDecimal", NumberDecimal);
  define("BinData", BinData);
  define("Timestamp", Timestamp);
  define("MinKey", MinKey);
  define("MaxKey", MaxKey);
  define("ISODate", ISODate);
  // The shell's helper functions are compiled only when a script first names one
  // (shell_helpers.js): a sandbox is made for every command, and most never use them.
  var helpers = null;
  ["UUID", "HexData", "DBRef", "tojson", "print", "printjson", "sleep", "hex_md5", "bsonsize"].forEach(function (name) {
    Object.defineProperty(global, name, {
      enumerable: false,
      configurable: false,
      get: function () {
        if (helpers === null) {
          var loaded = loadHelpers();
          helpers = loaded[0](BinData, loaded[1], internals);
        }
        return helpers[name];
      },
    });
  });
  Object.defineProperty(Object, "bsonsize", { get: function () { return global.bsonsize; } });

  // The helpers MongoDB's server-side JavaScript adds to Array, used by reduce functions.
  Array.sum = function (values) { var total = 0; for (var k = 0; k < values.length; k++) total += values[k]; return total; };
  Array.avg = function (values) { return values.length ? Array.sum(values) / values.length : null; };
  Array.contains = function (values, x) { return values.indexOf(x) >= 0; };
  Array.unique = function (values) { return values.filter(function (v, k) { return values.indexOf(v) === k; }); };

  // Read by position (bson_conversion.rs), which is cheaper than by name on every call.
  var internals = [ObjectId.prototype, NumberLong.prototype, NumberInt.prototype, NumberDecimal.prototype,
    BinData.prototype, Timestamp.prototype, Date.prototype, RegExp.prototype, minKey, maxKey, Date, RegExp,
    // One emit function per compiled script, and the function that hands over what it
    // was given since the last call. Once `group(reduce)` names the job's reduce, values
    // emitted under a primitive key (number, string, boolean, null, undefined) are kept
    // here, grouped by key, and reduced every `batch` values, so a mapReduce converts
    // them to BSON only once per key; other keys, whose equality is BSON's and not
    // JavaScript's, are handed over as key, value, key, value, ... Holding at most
    // `pendingMax` values keeps the runtime's memory bounded: past that, `drain` hands
    // every group's values over too.
    function makeEmit() {
      var emitted = [];
      var groups = new Map();
      var reduce = null, batch = 0, pendingMax = 0, pending = 0, reductions = 0, emits = 0;
      function reduceValues(key, values) {
        var result = reduce(key, values);
        reductions++;
        if (Array.isArray(result)) throw new Error("reduce -> multiple not supported yet");
        return result;
      }
      return [
        function emit(key, value) {
          if (arguments.length !== 2) throw new Error("emit takes 2 args");
          emits++;
          if (reduce === null || typeof key === "object" && key !== null || typeof key === "function") {
            emitted.push(key, value);
            return;
          }
          var values = groups.get(key);
          pending++;
          if (values === undefined) {
            groups.set(key, [value]);
          } else if (values.push(value) >= batch) {
            groups.set(key, [reduceValues(key, values)]);
            pending -= values.length - 1;
          }
        },
        // Returns [pairs, reduce calls, emit calls] since the last call; `all` hands the
        // groups over too.
        function drain(all) {
          var out = emitted;
          emitted = [];
          if (all || pending > pendingMax) {
            groups.forEach(function (values, key) {
              for (var k = 0; k < values.length; k++) out.push(key, values[k]);
            });
            groups = new Map();
            pending = 0;
          }
          var counted = [out, reductions, emits];
          reductions = 0;
          emits = 0;
          return counted;
        },
        function group(reduceFunction, reduceBatch, maxPending) {
          reduce = reduceFunction;
          batch = reduceBatch;
          pendingMax = maxPending;
        }
      ];
    }];
  return internals;
}
