/* placeholder: module under construction */
typedef int cfs_placeholder;
