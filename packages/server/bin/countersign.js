#!/usr/bin/env node
// Runs the compiled CLI (built by `npm install` through the root `prepare` script).
import '../dist/cli/index.js';
