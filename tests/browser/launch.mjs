// Debian's chromium, as every browser script starts it: headless, no name resolving (nothing
// beyond the loopback address could be reached), no first-run or background traffic.
// `SESSIOND_CHROMIUM` names another binary.
import { chromium } from 'playwright-core';

const OPTIONS = {
  executablePath: process.env.SESSIOND_CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1', '--no-first-run', '--disable-background-networking'],
};

// Started once more if it dies while starting (chromium now and then crashes at start-up
// on a loaded machine, before any page exists); a second failure is the test's.
export async function launchBrowser() {
  try {
    return await chromium.launch(OPTIONS);
  } catch (first) {
    console.error(`chromium did not start, trying once more: ${first.message.split('\n')[0]}`);
    return chromium.launch(OPTIONS);
  }
}
