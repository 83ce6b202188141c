import { expect, Page, TestInfo } from '@playwright/test';

export const USER = { email: 'e2e@dakghar.test', password: 'e2e password 123', account: 'E2E Account' };
export const ADMIN = { email: 'admin@dakghar.test', password: 'e2e admin password' };

/** With JavaScript on, waits until the page has hydrated, so clicks reach the app. */
export async function ready(page: Page, info: TestInfo) {
  if (info.project.name === 'hydrated') {
    await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
  }
}

export async function signIn(page: Page, info: TestInfo, password = USER.password, email = USER.email) {
  await page.goto('/login');
  await ready(page, info);
  await page.getByLabel('Email').fill(email);
  await page.getByLabel('Password').fill(password);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** Saves a screenshot into the test's output folder for reviewers. */
export async function snapshot(page: Page, info: TestInfo, name: string) {
  await page.screenshot({ path: info.outputPath(`${name}.png`), fullPage: true });
}
