/** Vite's `?url` imports: the emitted file's URL (used for the ELK web worker, loaded on demand). */
declare module '*?url' {
  const url: string;
  export default url;
}
