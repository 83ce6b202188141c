import { createServer, Server } from 'node:http';
import { expect, test } from '@playwright/test';
import { ready, signIn, snapshot } from './helpers';
import { api, embedPort, mailedLink, platform, Receiver, uniqueId } from './receiver';

test('an owner invites a member, who sets a password and arrives with their role', async ({ page, browser }, info) => {
  const email = `${uniqueId('invitee', info.project.name)}@dakghar.test`.toLowerCase();
  await signIn(page, info);
  await page.goto('/team');
  await ready(page, info);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Role', { exact: true }).selectOption('viewer');
  await page.getByRole('button', { name: 'Send invitation' }).click();
  if (info.project.name === 'hydrated') {
    await expect(page.getByTestId('invited')).toContainText(email);
  }
  await snapshot(page, info, 'team-invited');

  const link = await mailedLink(email, '/invitations/');
  const invitee = await browser.newContext({ javaScriptEnabled: info.project.name === 'hydrated' });
  const tab = await invitee.newPage();
  await tab.goto(link);
  await ready(tab, info);
  await tab.getByLabel('New password').fill('a viewer passphrase');
  await tab.getByRole('button', { name: 'Accept and sign in' }).click();
  await expect(tab).toHaveURL(/\/events$/);
  await expect(tab.getByTestId('user-email')).toHaveText(email);
  // A viewer reads; the pages offer nothing to change.
  await tab.goto('/endpoints');
  await ready(tab, info);
  await expect(tab.getByRole('heading', { name: 'Add an endpoint' })).toHaveCount(0);
  await expect(tab.getByRole('link', { name: 'Team' })).toHaveCount(0);
  await snapshot(tab, info, 'viewer-endpoints');

  // The link worked once.
  const again = await (await browser.newContext()).newPage();
  await again.goto(link);
  await again.getByLabel('New password').fill('another passphrase');
  await again.getByRole('button', { name: 'Accept and sign in' }).click();
  await expect(again.getByRole('alert')).toContainText('used or has expired');
  await invitee.close();
});

test('a forgotten password is reset by email, and the old session is signed out', async ({ page, browser }, info) => {
  const email = `reset-${info.project.name}@dakghar.test`;
  await signIn(page, info, 'e2e reset password', email);
  await expect(page).toHaveURL(/\/events$/);

  const other = await browser.newContext({ javaScriptEnabled: info.project.name === 'hydrated' });
  const tab = await other.newPage();
  await tab.goto('/login');
  await ready(tab, info);
  await tab.getByRole('link', { name: 'Forgot password?' }).click();
  await expect(tab).toHaveURL(/\/forgot-password$/);
  await ready(tab, info);
  await tab.getByLabel('Email').fill(email);
  await tab.getByRole('button', { name: 'Send a reset link' }).click();
  await expect(tab.getByTestId('reset-sent')).toBeVisible();
  await snapshot(tab, info, 'reset-sent');

  await tab.goto(await mailedLink(email, '/reset-password/'));
  await ready(tab, info);
  await tab.getByLabel('New password').fill('a brand new passphrase');
  await tab.getByRole('button', { name: 'Set password' }).click();
  await expect(tab).toHaveURL(/\/login\?reset=1$/);
  await expect(tab.getByTestId('password-changed')).toBeVisible();
  await ready(tab, info);
  await tab.getByLabel('Email').fill(email);
  await tab.getByLabel('Password').fill('a brand new passphrase');
  await tab.getByRole('button', { name: 'Sign in' }).click();
  await expect(tab).toHaveURL(/\/events$/);

  // The session from before the reset is over.
  await page.goto('/events');
  await expect(page).toHaveURL(/\/login\?next=/);
  await other.close();
});

test('a portal link opens inside another site\'s iframe, lets a developer resend, and works once', async ({ page }, info) => {
  // A dead letter in the account the platform hands the portal for.
  const rx = await Receiver.start([422]);
  const type = uniqueId('portal', info.project.name);
  const endpoint = await api('POST', '/api/v1/endpoints', { url: rx.url, event_types: [type] });
  const event = await api('POST', '/api/v1/events', { type, payload: { framed: true } });
  await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(1);
  const accounts = await platform('GET', '/api/v1/accounts?limit=100');
  const account = accounts.data.find((a: any) => a.name === 'E2E Account').id;
  const portal = await platform('POST', `/api/v1/accounts/${account}/portal-sessions`, {
    role: 'developer',
    ttl: '10m',
    return_url: 'https://app.example.com/webhooks',
  });

  // The platform's own page, on another site (localhost, not 127.0.0.1).
  const parent: Server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' });
    res.end(`<!DOCTYPE html><title>Platform</title><h1>Your webhooks</h1>
      <iframe title="Webhooks" src="${portal.url}" style="width:100%;height:900px"></iframe>`);
  });
  await new Promise<void>((ok) => parent.listen(embedPort, 'localhost', ok));
  try {
    await page.goto(`http://localhost:${embedPort}/`);
    const frame = page.frameLocator('iframe[title="Webhooks"]');
    await expect(frame.getByTestId('account-name')).toHaveText('E2E Account');
    await expect(frame.getByTestId('back-to-platform')).toHaveText('Back to app.example.com');
    await expect(frame.getByRole('link', { name: 'API keys' })).toHaveCount(0);
    await frame.getByRole('link', { name: event.id }).click();
    if (info.project.name === 'hydrated') {
      await expect(frame.locator('body')).toHaveAttribute('data-hydrated', 'true');
    }
    await frame.getByRole('button', { name: 'Resend' }).first().click();
    await expect.poll(() => rx.requests.length, { timeout: 20_000 }).toBe(2);
    await snapshot(page, info, 'portal-in-iframe');

    // The same link a second time grants nothing.
    const again = await page.context().browser()!.newContext();
    const tab = await again.newPage();
    const res = await tab.goto(portal.url);
    expect(res!.status()).toBe(410);
    await expect(tab.getByTestId('link-notice')).toContainText('used or has expired');
    await tab.goto('/events');
    await expect(tab).toHaveURL(/\/login/);
    await again.close();
  } finally {
    await new Promise((ok) => parent.close(ok));
    await api('DELETE', `/api/v1/endpoints/${endpoint.id}`);
    await rx.stop();
  }
});
