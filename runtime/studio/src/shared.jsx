// What the studio's views share: the library (skills, groups, actions) and the editor's
// drag state, and the modal dialog.
import { createContext, useEffect, useRef } from "react";

export const Studio = createContext(null);
export const EditorContext = createContext(null);

export function plural(count, one, many = `${one}s`) {
  return `${count} ${count === 1 ? one : many}`;
}

export function Dialog({ title, onClose, children }) {
  const ref = useRef(null);
  useEffect(() => {
    const dialog = ref.current;
    if (dialog && !dialog.open) dialog.showModal();
    return () => dialog && dialog.open && dialog.close();
  }, []);
  return (
    <dialog ref={ref} aria-labelledby="dialog-title" onCancel={(e) => { e.preventDefault(); onClose(); }}>
      <h2 id="dialog-title">{title}</h2>
      {children}
    </dialog>
  );
}
