import { useCallback, useMemo } from 'react';
import { useSearchParams } from 'react-router-dom';
import { readFilter, writeFilter, type ResourceFilter } from './filters';

/** The resource filter held in the URL (`?phase=&kind=&owner=&label=&name=`). */
export function useResourceFilter(): [ResourceFilter, (f: ResourceFilter) => void] {
  const [params, setParams] = useSearchParams();
  const key = params.toString();
  // eslint-disable-next-line react-hooks/exhaustive-deps
  const filter = useMemo(() => readFilter(params), [key]);
  const setFilter = useCallback(
    (f: ResourceFilter) => setParams((p) => writeFilter(p, f)),
    [setParams],
  );
  return [filter, setFilter];
}
