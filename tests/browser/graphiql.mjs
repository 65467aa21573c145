// Opens sessiond's GraphiQL in the system's chromium (playwright-core, no browser download),
// runs `{ viewer { user { email } } }` with a token, and saves a screenshot. Any request to
// a host other than the server is blocked and counted. Prints one JSON line:
// {result, blocked}. Usage: node graphiql.mjs <http://127.0.0.1:port> <token> <screenshot.png>
import { launchBrowser } from './launch.mjs';

const [base, token, screenshot] = process.argv.slice(2);
const server = new URL(base);
const browser = await launchBrowser();
let blocked = [];
try {
  const context = await browser.newContext();
  await context.route('**/*', (route) => {
    const url = new URL(route.request().url());
    if (url.host === server.host) return route.continue();
    blocked.push(url.href);
    return route.abort();
  });
  // The query GraphiQL keeps from before; the token is typed in, as the tab keeps it only.
  await context.addInitScript(() => {
    window.localStorage.setItem('graphiql:query', '{ viewer { user { email } } }');
  });
  const page = await context.newPage();
  await page.goto(new URL('/graphiql', base).href);
  await page.fill('#token', token);
  await page.press('#token', 'Enter');
  await page.locator('.graphiql-execute-button').click({ timeout: 30000 });
  const response = page.locator('.graphiql-response');
  await response.getByText('@example.com').first().waitFor({ timeout: 30000 });
  const result = (await response.innerText()).replace(/\s+/g, ' ');
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(JSON.stringify({ result, blocked }));
} finally {
  await browser.close();
}
