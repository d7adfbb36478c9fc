import { useMutation, useQueryClient } from '@tanstack/react-query';

/** A mutation that refreshes every resource view when it settles. */
export function useResourceMutation<T, V = void>(fn: (v: V) => Promise<T>) {
  const qc = useQueryClient();
  return useMutation({
    mutationFn: fn,
    onSettled: () => {
      for (const k of ['resource', 'resources', 'summary', 'roots', 'graph', 'ops', 'deps', 'history', 'activity']) void qc.invalidateQueries({ queryKey: [k] });
    },
  });
}
