/** node-pg's value mapping (pg/lib/utils.js), which @types/pg does not declare. */
declare module 'pg/lib/utils.js' {
  const utils: {
    /** Maps a JavaScript value to the text node-pg sends for it (arrays as array literals, null as null). */
    prepareValue(value: unknown): unknown;
  };
  export default utils;
}
