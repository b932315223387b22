#!/usr/bin/env node
const x: number = 1;
console.log("hi", x, process.version);
