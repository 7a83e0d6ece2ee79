// The shell's helper functions for server-side JavaScript (tojson, print, printjson,
// sleep, hex_md5, UUID, HexData, DBRef, bsonsize), compiled when a script first names one
// of them (see shell_types.js). The value of the script is a function that, given the
// BinData constructor, the host's natives and the BSON conversion's internals, returns
// the helpers by name. Not wrapped in parentheses, as shell_types.js, for QuickJS's parser.
0, function (BinData, natives, internals) {
  "use strict";
  function hexToBase64(hex) {
    hex = String(hex).replace(/-/g, "");
    if (!/^([0-9a-fA-F]{2})*$/.test(hex)) throw new Error("invalid hex string: " + hex);
    var digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    var bytes = [];
    for (var k = 0; k < hex.length; k += 2) bytes.push(parseInt(hex.substr(k, 2), 16));
    var out = "";
    for (var b = 0; b < bytes.length; b += 3) {
      var n = (bytes[b] << 16) | ((bytes[b + 1] || 0) << 8) | (bytes[b + 2] || 0);
      out += digits[n >> 18 & 63] + digits[n >> 12 & 63] +
        (b + 1 < bytes.length ? digits[n >> 6 & 63] : "=") + (b + 2 < bytes.length ? digits[n & 63] : "=");
    }
    return out;
  }
  function UUID(hex) {
    if (hex === undefined) {
      hex = "";
      for (var k = 0; k < 32; k++) hex += Math.floor(Math.random() * 16).toString(16);
    }
    if (String(hex).replace(/-/g, "").length !== 32) throw new Error("UUID needs a 32-digit hex string");
    return new BinData(4, hexToBase64(hex));
  }
  function HexData(subtype, hex) { return new BinData(subtype, hexToBase64(hex)); }
  function DBRef(collection, id, db) {
    if (!(this instanceof DBRef)) return new DBRef(collection, id, db);
    this.$ref = collection;
    this.$id = id;
    if (db !== undefined) this.$db = db;
  }

  // The shell's tojson: its own spacing, typed values in their constructor form.
  function tojson(value, indent) {
    if (value === undefined) return "undefined";
    if (value === null) return "null";
    if (typeof value === "string") return JSON.stringify(value);
    if (typeof value !== "object") return String(value);
    if (typeof value.tojson === "function") return value.tojson();
    if (value instanceof Date) return 'ISODate("' + (isNaN(value) ? "Invalid Date" : value.toISOString()) + '")';
    if (value instanceof RegExp) return String(value);
    if (Array.isArray(value)) return "[ " + value.map(function (v) { return tojson(v); }).join(", ") + " ]";
    var keys = Object.keys(value);
    if (keys.length === 0) return "{ }";
    return "{ " + keys.map(function (k) { return JSON.stringify(k) + " : " + tojson(value[k]); }).join(", ") + " }";
  }
  function print() {
    natives.log(Array.prototype.map.call(arguments, function (v) { return typeof v === "string" ? v : tojson(v); }).join(" "));
  }

  return {
    UUID: UUID,
    HexData: HexData,
    DBRef: DBRef,
    tojson: tojson,
    print: print,
    printjson: function (value) { natives.log(tojson(value)); },
    sleep: function (ms) { natives.sleep(Number(ms)); },
    hex_md5: function (text) { return natives.md5(String(text)); },
    bsonsize: function (value) { return natives.bsonSize(internals, value); },
  };

}
