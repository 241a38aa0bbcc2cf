import { useEffect, useState } from 'preact/hooks';

/** Hash routes (`#/runs/<id>`): the server serves one page, and a reload keeps the place. */
export function useRoute(): string[] {
  const read = () => (location.hash.replace(/^#\/?/, '') || 'dashboard').split('/').map(decodeURIComponent);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const onChange = () => setRoute(read());
    addEventListener('hashchange', onChange);
    return () => removeEventListener('hashchange', onChange);
  }, []);
  return route;
}

export const href = (...parts: string[]) => '#/' + parts.map(encodeURIComponent).join('/');

export function go(...parts: string[]): void {
  location.hash = href(...parts);
}
