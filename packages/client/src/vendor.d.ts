// Minimal typings for the two CommonJS dependencies that ship none (only what the client uses).

declare module 'geoip-lite' {
  /** One lookup result of the bundled GeoLite database. */
  interface Lookup {
    country: string;
    region: string;
    city: string;
    timezone: string;
    ll: [number, number];
    eu: string;
  }
  const geoip: {
    /** Looks an IPv4 or IPv6 address up; null when unknown. */
    lookup(ip: string): Lookup | null;
  };
  export default geoip;
}

declare module 'ua-parser-js' {
  interface Part {
    name?: string;
    version?: string;
  }
  /** The parsed user agent (ua-parser-js v1). */
  interface Result {
    ua: string;
    browser: Part & { major?: string };
    engine: Part;
    os: Part;
    device: { vendor?: string; model?: string; type?: string };
    cpu: { architecture?: string };
  }
  /** Parses a user-agent string. */
  function UAParser(ua?: string): Result;
  export = UAParser;
}
